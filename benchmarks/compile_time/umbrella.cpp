// Compile-time stress: the cost of including the umbrella header, with nothing used.
#include <metagrad/metagrad.hpp>

int main() { return 0; }
