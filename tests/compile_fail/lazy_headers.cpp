// Cheap headers (docs/performance.md): a file that includes the umbrella header and applies no
// op instantiates none (Note [Lazy members], Note [Engine ops], Note [View refresh]). Both
// builds define MG_DETAIL_CHECK_LAZY, under which instantiating an op is a compile error: the
// _ok twin, which applies none, must build; with MG_COMPILE_FAIL the file applies one and must
// fail with that sentence (so the check itself is known to fire).
#include <metagrad/metagrad.hpp>

int main() {
#ifdef MG_COMPILE_FAIL
  const mg::tensor x(1.0);
  return (x + x).item<double>() == 2.0 ? 0 : 1;
#else
  return 0;
#endif
}
