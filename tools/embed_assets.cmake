# Writes OUT, a C++ source holding the browser's files (web/static, and the Debian-packaged
# libraries the pages load) with what serving them needs, all worked out here at build time: the
# bytes, the content type, a strong ETag and a versioned path from the content, and the Subresource
# Integrity ("sha256-<base64>", W3C SRI section 3.1) of each. src/http/assets.cc serves them.
#
#   cmake -DOUT=web_assets.cc "-DASSETS=/static/app.js=/path/app.js|/static/x.css=/path/x.css"
#         -P tools/embed_assets.cmake
#
# CMakeLists.txt runs it only when one of the files (or this script) changes.
cmake_minimum_required(VERSION 3.25)

# Base64 (RFC 4648, with padding) of the bytes a hex string spells: CMake's string() hashes give
# hex only, and SRI wants the digest's bytes in base64.
function(hex_to_base64 hex out)
  set(alphabet "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
  string(LENGTH "${hex}" hex_length)
  set(encoded "")
  set(i 0)
  while(i LESS hex_length)
    math(EXPR left "${hex_length} - ${i}")
    if(left GREATER 6)
      set(left 6)
    endif()
    string(SUBSTRING "${hex}" ${i} ${left} group)
    # Pad the last group to three bytes; the padding's characters become '=' below.
    set(padded "${group}000000")
    string(SUBSTRING "${padded}" 0 6 padded)
    math(EXPR bits "0x${padded}")
    foreach(shift 18 12 6 0)
      math(EXPR index "(${bits} >> ${shift}) & 63")
      string(SUBSTRING "${alphabet}" ${index} 1 char)
      string(APPEND encoded "${char}")
    endforeach()
    if(left EQUAL 2)
      string(REGEX REPLACE "..$" "==" encoded "${encoded}")
    elseif(left EQUAL 4)
      string(REGEX REPLACE ".$" "=" encoded "${encoded}")
    endif()
    math(EXPR i "${i} + 6")
  endwhile()
  set(${out} "${encoded}" PARENT_SCOPE)
endfunction()

function(content_type file out)
  get_filename_component(extension "${file}" LAST_EXT)
  if(extension STREQUAL ".css")
    set(${out} "text/css; charset=utf-8" PARENT_SCOPE)
  elseif(extension STREQUAL ".js")
    set(${out} "text/javascript; charset=utf-8" PARENT_SCOPE)
  else()
    message(FATAL_ERROR "embed_assets: no content type for ${file}")
  endif()
endfunction()

# Included (tests/web/embed_assets_test.cmake tests the functions above), it writes nothing.
if(NOT CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  return()
endif()
if(NOT OUT OR NOT ASSETS)
  message(FATAL_ERROR "embed_assets: set OUT and ASSETS")
endif()

string(REPLACE "|" ";" assets "${ASSETS}")
set(bodies "")
set(entries "")
set(n 0)
foreach(asset IN LISTS assets)
  string(FIND "${asset}" "=" split)
  string(SUBSTRING "${asset}" 0 ${split} path)
  math(EXPR split "${split} + 1")
  string(SUBSTRING "${asset}" ${split} -1 file)
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "embed_assets: ${file} (for ${path}) does not exist")
  endif()
  content_type("${file}" type)
  file(SHA256 "${file}" sha256)
  hex_to_base64("${sha256}" integrity)
  string(SUBSTRING "${sha256}" 0 16 etag)
  string(SUBSTRING "${sha256}" 0 10 version)

  # Every byte as a \xNN escape, 20 to a line: exact for any byte, and no escape can run into
  # the next character. (CMake's regular expressions have no {n}: the line's pattern is spelled.)
  file(READ "${file}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" escaped "${hex}")
  string(REPEAT "\\\\x[0-9a-f][0-9a-f]" 20 line)
  string(REGEX REPLACE "(${line})" "\\1\"\n    \"" escaped "${escaped}")
  string(APPEND bodies "// ${path}: ${file}\nconstexpr char kBody${n}[] =\n    \"${escaped}\";\n")
  string(APPEND entries "    {\"${path}\", \"${type}\", {kBody${n}, ${size}}, \"\\\"${etag}\\\"\",\n"
                        "     \"${path}?v=${version}\", \"sha256-${integrity}\"},\n")
  math(EXPR n "${n} + 1")
endforeach()

set(source "// Written by tools/embed_assets.cmake from the files named below: edit those, not this.
#include \"assets.h\"

namespace sluice::http {
namespace {

${bodies}
constexpr Asset kAssets[] = {
${entries}};

}  // namespace

std::span<const Asset> EmbeddedAssets() { return kAssets; }

}  // namespace sluice::http
")
file(WRITE "${OUT}" "${source}")
