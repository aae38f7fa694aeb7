/*
 * status.c
 *	  Text for WalsStatus codes.
 *
 * The glue puts these strings in an error's detail, next to a message of its
 * own, so they stay short and lower case, as PostgreSQL's style asks of
 * detail fragments.
 */
#include "wals_core.h"

/*
 * The switch has no default so that the compiler warns when a status is
 * added without a text; a value outside the enum still gets a string.
 */
const char *
wals_status_string(WalsStatus status)
{
	switch (status)
	{
		case WALS_OK:
			return "ok";
		case WALS_EINVAL:
			return "invalid argument";
		case WALS_ENONFINITE:
			return "value is NaN or infinite";
		case WALS_ESINGULAR:
			return "system is not positive definite";
		case WALS_ETOOBIG:
			return "too many distinct ids";
		case WALS_ENOMEM:
			return "out of memory";
		case WALS_EDEVICE:
			return "the device failed";
		case WALS_ECODES:
			return "too many distinct ratings for codes";
	}
	return "unknown status";
}
