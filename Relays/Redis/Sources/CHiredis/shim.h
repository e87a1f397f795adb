// hiredis, the C client of Redis (Debian's libhiredis-dev, Homebrew's hiredis), for its reply
// reader and command formatting. Included by its directory so that the default include path
// finds it on both.
#include <hiredis/hiredis.h>
