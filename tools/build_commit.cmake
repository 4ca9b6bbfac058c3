# Writes the commit the build is made from into OUT (a one-line C++ source, src/app/build_commit.h),
# at every build but rewriting it only when the commit changes, so a build of an unchanged tree
# compiles nothing. A tree without git (a release tarball) says "unknown", unless the packager
# passes SLUICE_COMMIT.
if(SLUICE_COMMIT)
  set(commit "${SLUICE_COMMIT}")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12 --exclude=*
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                  RESULT_VARIABLE status)
  if(NOT status EQUAL 0 OR commit STREQUAL "")
    set(commit "unknown")
  endif()
endif()
set(source "// Written by tools/build_commit.cmake.\n#include \"build_commit.h\"\nconst char* const sluice::app::kBuildCommit = \"${commit}\";\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL source)
  file(WRITE "${OUT}" "${source}")
endif()
