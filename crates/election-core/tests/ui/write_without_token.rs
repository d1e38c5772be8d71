// A store write that needs a token does not compile without one.
use election_core::WriteToken;

struct Store {
    rows: Vec<u64>,
}

impl Store {
    fn append(&mut self, token: &WriteToken<'_>, row: u64) {
        let _ = token.epoch();
        self.rows.push(row);
    }
}

fn main() {
    let mut store = Store { rows: Vec::new() };
    store.append(42);
}
