# A generated header users commit into their engines stays under 64 KiB.
#   cmake -DHEADER=<path> -P check_header_size.cmake
file(SIZE "${HEADER}" header_bytes)
if(header_bytes GREATER_EQUAL 65536)
  message(FATAL_ERROR "${HEADER}: ${header_bytes} bytes; a generated header must stay under 64 KiB (65536 bytes)")
endif()
message(STATUS "${HEADER}: ${header_bytes} bytes (limit 65536)")
