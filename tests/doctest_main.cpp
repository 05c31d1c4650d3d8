// tests/doctest_main.cpp — the main() every test executable shares (doctest's own runner).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
