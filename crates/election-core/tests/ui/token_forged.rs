// No token can be made outside a guard: no Default, no Clone, no struct
// literal (private fields).
use election_core::WriteToken;

fn main() {
    let _default = WriteToken::default();
    let _copy = |t: &WriteToken<'_>| WriteToken::clone(t);
    let _literal = WriteToken { epoch: election_core::Epoch::FIRST };
}
