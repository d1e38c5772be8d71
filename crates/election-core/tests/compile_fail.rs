//! The write token's promises, checked by the compiler: it cannot escape
//! its guard, cannot be forged, and a write that needs one does not compile
//! without it.

#[test]
fn token_misuse_does_not_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
