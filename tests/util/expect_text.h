// expect_text.h - GoogleTest checks on error sentences.
#ifndef KOLO_TESTS_UTIL_EXPECT_TEXT_H
#define KOLO_TESTS_UTIL_EXPECT_TEXT_H

#include <gtest/gtest.h>

#include <string>

// EXPECT_CONTAINS(text, part): text (a std::string or C string) contains part.
#define EXPECT_CONTAINS(text, part)                                                           \
  EXPECT_NE(std::string(text).find(part), std::string::npos)                                  \
      << "\"" << std::string(text) << "\" does not contain \"" << (part) << "\""

#endif
