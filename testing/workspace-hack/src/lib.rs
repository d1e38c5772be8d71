//! No code: a dependency of the never-published members (the test kits,
//! torture, the bench) whose manifest lists the dependency features the
//! workspace build resolves, so that such a member built alone compiles
//! the same dependency units as the workspace (ADR 0085). See its
//! `Cargo.toml`.
