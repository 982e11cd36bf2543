//! Sizes in bytes (`memory`, `reserve`, a sleep mode's `memory`): a whole
//! number, or a number with a decimal or binary unit.

use super::error::{KeyPath, Reason};
use super::fields::Diagnostics;
use super::node::Node;

/// A size in bytes: a whole number, or a number (fractions allowed) with a
/// decimal (`KB`, `MB`, `GB`, `TB`) or binary (`KiB`, `MiB`, `GiB`, `TiB`, and
/// `K`, `M`, `G`, `T` alone) unit.
pub(crate) fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "K" | "Ki" | "KiB" => 1 << 10,
        "M" | "Mi" | "MiB" => 1 << 20,
        "G" | "Gi" | "GiB" => 1 << 30,
        "T" | "Ti" | "TiB" => 1 << 40,
        _ => return None,
    };
    match number.split_once('.') {
        None => number.parse::<u64>().ok()?.checked_mul(factor),
        Some((whole, fraction)) => {
            if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
                return None;
            }
            let whole: u64 = if whole.is_empty() {
                0
            } else {
                whole.parse().ok()?
            };
            let digits = fraction.len().min(9);
            let fraction: u64 = if digits == 0 {
                0
            } else {
                fraction[..digits].parse().ok()?
            };
            let scale = 10u64.pow(u32::try_from(digits).ok()?);
            let part = u128::from(fraction) * u128::from(factor) / u128::from(scale);
            whole
                .checked_mul(factor)?
                .checked_add(u64::try_from(part).ok()?)
        }
    }
}

/// Reads a size in bytes (0 allowed); a bad value is an error naming its key.
pub(crate) fn read_bytes(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Option<u64> {
    if let Node::Int(..) = node {
        let bytes = cx.int_min(node, path, 0)?;
        return u64::try_from(bytes).ok();
    }
    let text = cx.string(node, path)?;
    let parsed = parse_bytes(&text);
    if parsed.is_none() {
        cx.error(path.clone(), Reason::InvalidSize { got: text });
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_take_fractions_and_decimal_and_binary_units() {
        assert_eq!(parse_bytes("1024"), Some(1024));
        assert_eq!(parse_bytes("21GiB"), Some(21 << 30));
        assert_eq!(parse_bytes("21G"), Some(21 << 30));
        assert_eq!(parse_bytes("1.5GiB"), Some(3 << 29));
        assert_eq!(parse_bytes("24 GB"), Some(24_000_000_000));
        assert_eq!(parse_bytes("512MiB"), Some(512 << 20));
        assert_eq!(parse_bytes(".5K"), Some(512));
        assert_eq!(parse_bytes("1.2.3G"), None);
        assert_eq!(parse_bytes("GiB"), None);
        assert_eq!(parse_bytes("12 parsecs"), None);
    }
}
