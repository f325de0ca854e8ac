// Compile-time stress: <metagrad/static.hpp> alone, for scalar functions, with nothing used.
#include <metagrad/static.hpp>

int main() { return 0; }
