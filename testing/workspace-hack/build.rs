//! No work: the build script exists so that the host dependencies listed
//! under `[build-dependencies]` (syn, with the workspace's features) take
//! part in the host feature resolution (ADR 0085).

fn main() {}
