# PCRE2's 8-bit library (libpcre2-dev): PCRE2::pcre2_8, for zero::text's pre-tokenizer.
include(${CMAKE_CURRENT_LIST_DIR}/ZeroFindLibrary.cmake)
zero_find_library(PCRE2 TARGET PCRE2::pcre2_8 LIBRARY pcre2-8 HEADER pcre2.h)
