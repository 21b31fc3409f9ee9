/* A compile-time check, never linked: api.h's declarations against the
 * real cusolverMp.h. Every real function is assigned to our pointer type;
 * under -Werror a difference in any parameter fails the build
 * (cmake/cuda.cmake builds this object only where it finds the header). */
#include <cusolverMp.h>

#include "engine/cusolvermp/api.h"

_Static_assert((int)CUSOLVERMP_GRID_MAPPING_COL_MAJOR == (int)JMG_MP_GRID_COL_MAJOR &&
                   (int)CUSOLVERMP_GRID_MAPPING_ROW_MAJOR == (int)JMG_MP_GRID_ROW_MAJOR,
               "grid mapping values");
_Static_assert(sizeof(cusolverMpGridMapping_t) == sizeof(unsigned int),
               "the grid mapping is passed as an unsigned int");

#define JMG_MP_CHECK(field, name) .field = name,
const jmg_mp_api jmg_mp_api_check = {JMG_MP_FUNCTIONS(JMG_MP_CHECK)};
