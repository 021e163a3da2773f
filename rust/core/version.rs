//! The package version as a wheel carries it: Cargo's SemVer version (`0.2.0-dev0`) written as
//! PEP 440 (`0.2.0.dev0`), as maturin names the wheel. `.ci/wheel_version.py` is the same
//! mapping for the release scripts (tests/project/test_packaging.py checks the two agree).

/// `0.2.0-dev0` -> `0.2.0.dev0`, `1.0.0-rc1` / `1.0.0-rc.1` -> `1.0.0rc1`, `1.0.0-alpha.2` ->
/// `1.0.0a2`, `1.0.0-beta2` -> `1.0.0b2`, `1.0.0` -> `1.0.0`. A pre-release label PEP 440 has
/// no spelling of is kept as Cargo writes it.
pub fn pep440(cargo: &str) -> String {
    let Some((release, pre)) = cargo.split_once('-') else {
        return cargo.to_string();
    };
    let label_end = pre
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(pre.len());
    let (label, rest) = pre.split_at(label_end);
    let number = rest.trim_start_matches(['.', '-']);
    if !number.bytes().all(|b| b.is_ascii_digit()) {
        return cargo.to_string();
    }
    let spelled = match label.to_ascii_lowercase().as_str() {
        "alpha" | "a" => "a",
        "beta" | "b" => "b",
        "rc" | "c" | "pre" | "preview" => "rc",
        "dev" => ".dev",
        _ => return cargo.to_string(),
    };
    let number: u64 = number.parse().unwrap_or(0);
    format!("{release}{spelled}{number}")
}

#[cfg(test)]
mod tests {
    use super::pep440;

    #[test]
    fn pre_releases_and_releases() {
        for (cargo, wheel) in [
            ("0.2.0-dev0", "0.2.0.dev0"),
            ("1.0.0-rc1", "1.0.0rc1"),
            ("1.0.0-rc.2", "1.0.0rc2"),
            ("1.0.0-alpha.1", "1.0.0a1"),
            ("1.0.0-beta2", "1.0.0b2"),
            ("1.0.0", "1.0.0"),
            ("0.10.3", "0.10.3"),
        ] {
            assert_eq!(pep440(cargo), wheel, "{cargo}");
        }
    }
}
