# tools/embed_assets.cmake's base64, which makes every Subresource Integrity the pages carry, on
# RFC 4648's test vectors (section 10), each padding case included, and on a SHA-256 digest.
#   cmake -P tests/web/embed_assets_test.cmake   (ctest web.embed_assets)
include(${CMAKE_CURRENT_LIST_DIR}/../../tools/embed_assets.cmake)

set(failures 0)
function(expect text want)
  string(HEX "${text}" hex)
  hex_to_base64("${hex}" got)
  if(NOT got STREQUAL want)
    message(SEND_ERROR "base64 of '${text}': got '${got}', want '${want}'")
  endif()
endfunction()

expect("" "")
expect("f" "Zg==")
expect("fo" "Zm8=")
expect("foo" "Zm9v")
expect("foob" "Zm9vYg==")
expect("fooba" "Zm9vYmE=")
expect("foobar" "Zm9vYmFy")
# SHA-256 of "abc" (FIPS 180-2's example), as `openssl dgst -sha256 -binary | base64` spells it.
string(SHA256 digest "abc")
hex_to_base64("${digest}" got)
if(NOT got STREQUAL "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=")
  message(SEND_ERROR "base64 of SHA-256(abc): got '${got}'")
endif()
