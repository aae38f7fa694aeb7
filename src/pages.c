/*
 * pages.c
 *	  Transparent huge pages and faulting in ahead of use, for the large
 *	  buffers of a training and the shared copies of a model's items.
 *
 * A large training writes half a gigabyte of fresh memory, and faulting it
 * in page by page, then missing the TLB on most random writes, can cost
 * more than reading the ratings, in virtual machines above all.  So large
 * buffers ask for transparent huge pages and are faulted in ahead of use, a
 * few megabytes per system call.  Both are hints: where the kernel offers
 * neither, pages fault in on first touch as usual.
 */
#include "postgres.h"

#include <sys/mman.h>
#include <unistd.h>

#include "miscadmin.h"

#include "wals.h"

/* Huge pages are 2 MB where there are any, and only whole ones count. */
#define WALS_HUGE_PAGE				(2 * 1024 * 1024)

/* Faulted in per system call: about a millisecond of work on 4 kB pages. */
#define WALS_PREFAULT_CHUNK			(16 * 1024 * 1024)

/* Ask for huge pages for [p, p + bytes); only a hint. */
void
wals_advise_huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
	uintptr_t	start = TYPEALIGN(WALS_HUGE_PAGE, (uintptr_t) p);
	uintptr_t	end = TYPEALIGN_DOWN(WALS_HUGE_PAGE, (uintptr_t) p + bytes);

	if (end > start)
		(void) madvise((void *) start, end - start, MADV_HUGEPAGE);
#endif
}

/* A huge allocation in cxt, asking for huge pages. */
void *
wals_alloc_huge(MemoryContext cxt, size_t bytes)
{
	void	   *p = MemoryContextAllocHuge(cxt, Max(bytes, 1));

	wals_advise_huge_pages(p, bytes);
	return p;
}

/*
 * Fault in the whole pages of [p, p + bytes) with advice (for reading or
 * for writing), a few megabytes per system call, answering a cancel
 * between them.  A fault costs microseconds where a hypervisor shadows
 * the guest's page tables, and one call maps thousands of pages for the
 * cost of a few faults.  Only a hint: where the kernel cannot, pages fault
 * in on first touch as usual.
 */
static void
prefault(void *p, size_t bytes, int advice)
{
	uintptr_t	page = (uintptr_t) sysconf(_SC_PAGESIZE);
	uintptr_t	start = TYPEALIGN(page, (uintptr_t) p);
	uintptr_t	end = TYPEALIGN_DOWN(page, (uintptr_t) p + bytes);

	while (start < end)
	{
		uintptr_t	to = Min(end, start + WALS_PREFAULT_CHUNK);

		CHECK_FOR_INTERRUPTS();
		if (madvise((void *) start, to - start, advice) != 0)
			return;
		start = to;
	}
}

/* Fault in [p, p + bytes) for writing; the contents are unchanged. */
void
wals_prefault(void *p, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
	prefault(p, bytes, MADV_POPULATE_WRITE);
#endif
}

/*
 * Give back the memory of the whole pages of [p, p + bytes), the unused
 * tail of a shared segment, which a segment backs in full when it is made:
 * nothing maps it after.  Only a hint: where the kernel cannot, the pages
 * stay until the segment goes.
 */
void
wals_release_shared(void *p, size_t bytes)
{
#ifdef MADV_REMOVE
	uintptr_t	start = TYPEALIGN(sysconf(_SC_PAGESIZE), (uintptr_t) p);
	uintptr_t	end = TYPEALIGN_DOWN(sysconf(_SC_PAGESIZE), (uintptr_t) p + bytes);

	if (end > start)
		(void) madvise((void *) start, end - start, MADV_REMOVE);
#endif
}

/*
 * Fault in [p, p + bytes) of a shared segment for reading, which maps its
 * pages as the segment is mapped: to be written too, where it is.
 */
void
wals_prefault_read(const void *p, size_t bytes)
{
#ifdef MADV_POPULATE_READ
	prefault((void *) p, bytes, MADV_POPULATE_READ);
#endif
}
