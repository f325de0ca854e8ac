# cmake -DDOC=<markdown> -DSOURCE=<file> -DNAME=<snippet> -P check_snippets.cmake
# Fails unless the lines between `// example-begin NAME` and `// example-end NAME` in SOURCE
# appear verbatim in DOC: documentation snippets are cut from files CI compiles.
file(READ "${SOURCE}" src)
file(READ "${DOC}" doc)
string(FIND "${src}" "// example-begin ${NAME}\n" b)
string(FIND "${src}" "// example-end ${NAME}" e)
if(b EQUAL -1 OR e EQUAL -1)
  message(FATAL_ERROR "snippet '${NAME}' not marked in ${SOURCE}")
endif()
string(LENGTH "// example-begin ${NAME}\n" skip)
math(EXPR start "${b} + ${skip}")
math(EXPR len "${e} - ${start}")
string(SUBSTRING "${src}" ${start} ${len} snippet)
string(REGEX REPLACE "[ ]+$" "" snippet "${snippet}")  # the indentation of the end marker
string(FIND "${doc}" "${snippet}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "${DOC} does not contain snippet '${NAME}' of ${SOURCE} verbatim; copy it again")
endif()
message(STATUS "snippet '${NAME}' of ${SOURCE} is in ${DOC}")
