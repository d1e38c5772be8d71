//! Checks of error messages: an error's whole chain as a log line shows
//! it, for the `Display` tests every crate runs (issue 26, ADR 0063).

/// `e`'s message and every source's below it, joined by `": "`, as
/// `elect` and a chain-printing logger show an error.
///
/// ```
/// use election_testkit::display::chain;
///
/// let refused = std::io::Error::other("connection refused");
/// assert_eq!(chain(&refused), "connection refused"); // no source below it
/// ```
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut next = e.source();
    while let Some(s) = next {
        parts.push(s.to_string());
        next = s.source();
    }
    parts.join(": ")
}

/// Asserts that each error's [`chain`] is exactly the text beside it.
///
/// ```
/// use election_testkit::display::assert_chains;
///
/// assert_chains([(std::io::Error::other("disk full"), "disk full")]);
/// ```
pub fn assert_chains<E: std::error::Error>(cases: impl IntoIterator<Item = (E, &'static str)>) {
    for (e, want) in cases {
        assert_eq!(chain(&e), want, "{e:?}");
    }
}
