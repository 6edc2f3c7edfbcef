//! The probe against the real kernel.

/// Prints what this kernel supports; every layer must be reported one way
/// or the other, with a reason for each failure.
#[test]
fn probe_reports_every_layer() {
    let support = kaji_sandbox::probe();
    println!("sandbox support here: {support:#?}");
    let failed = [support.landlock, support.user_namespaces, support.seccomp]
        .iter()
        .filter(|ok| !**ok)
        .count();
    assert_eq!(failed, support.problems.len(), "{support:?}");
    if support.landlock {
        assert!(support.landlock_abi >= 1, "{support:?}");
    }
}
