// fuzz_pickle.cc — the pickle program of a PyTorch file (pickle_machine.h), run alone.
#include "compare/pickle_machine.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tensorscope::compare::PickleMachine machine;
  (void)machine.run(tensorscope::fuzz::as_string(data, size), "fuzz.pkl");
  return 0;
}
