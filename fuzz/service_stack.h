// What the whole-server fuzz targets (request_fuzz.cc, answers_fuzz.cc) run over: a PasteService on
// the in-memory stores with its limits far away, since they explore what the edge says rather than
// the buckets' arithmetic, and a ViewRenderer whose highlighter workers are the target's own
// binary.
#pragma once

#include <cstdlib>
#include <memory>
#include <string_view>

#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/render/view_renderer.h"
#include "sluice/service/admission_control.h"
#include "sluice/service/paste_cache.h"
#include "sluice/service/paste_service.h"
#include "sluice/store/backends.h"

namespace sluice::fuzzing {

/// Not copyable or movable: the service and the renderer keep references to the members above.
struct ServiceStack {
  explicit ServiceStack(service::ServiceOptions options = {}) {
    service::AdmissionOptions admission;
    admission.ip_create_count = admission.global_create_count = {1e9, 1e9};
    admission.ip_create_bytes = admission.global_create_bytes = {1e12, 1e12};
    admission.ip_read = admission.ip_delete = admission.ip_report = {1e9, 1e9};
    admission_control =
        std::make_unique<service::AdmissionControl>(admission, SystemClock::Instance(), metrics);
    paste_service = std::make_unique<service::PasteService>(
        *meta, *blobs, cache, *admission_control, SystemClock::Instance(), metrics, options);
    render::ViewRendererOptions render;
    render.worker_command = {"/proc/self/exe", "highlight-worker"};
    // AddressSanitizer maps terabytes of shadow: a worker under an address-space limit dies at
    // start, and every view would fall to the plain rung.
    render.worker_memory_limit_bytes = 0;
    renderer = std::make_unique<render::ViewRenderer>(render, SystemClock::Instance(), metrics);
  }
  ServiceStack(const ServiceStack&) = delete;
  ServiceStack& operator=(const ServiceStack&) = delete;

  MetricsRegistry metrics;
  std::unique_ptr<store::MetaStore> meta = store::MakeMemoryMetaStore();
  std::unique_ptr<store::BlobStore> blobs = store::MakeMemoryBlobStore();
  service::PasteCache cache{1 << 20};
  std::unique_ptr<service::AdmissionControl> admission_control;
  std::unique_ptr<service::PasteService> paste_service;
  std::unique_ptr<render::ViewRenderer> renderer;
};

/// For LLVMFuzzerInitialize: the highlighter's workers are this binary again, started with
/// `highlight-worker`; such a process becomes the worker and never returns.
inline void BecomeHighlightWorkerIfAsked(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "highlight-worker") {
    std::exit(render::HighlightWorkerMain(argc, argv));
  }
}

}  // namespace sluice::fuzzing
