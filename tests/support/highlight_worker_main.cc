// The highlighter worker the tests start, for builds without the server binary (the sanitizer
// builds); the server runs the same code as `sluice highlight-worker`.
#include "sluice/render/highlight_workers.h"

int main(int argc, char** argv) { return sluice::render::HighlightWorkerMain(argc, argv); }
