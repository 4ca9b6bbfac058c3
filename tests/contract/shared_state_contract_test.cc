// The SharedState contract against the in-memory store (the Redis run is in tests/backend).
#include "shared_state_contract.h"

namespace sluice::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(memory, SharedStateContract, ::testing::Values(SharedStateFactory([] {
                           return store::MakeMemorySharedState(SystemClock::Instance());
                         })),
                         [](const auto&) { return std::string("store"); });

}  // namespace
}  // namespace sluice::testing
