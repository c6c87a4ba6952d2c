//! What an SMS costs: its encoding and the segments it is split into. GSM-7 when every
//! character is in the GSM 03.38 alphabet (extension characters take two septets), UCS-2
//! as soon as one is not (UTF-16 code units: an emoji takes two).

use serde::Serialize;

/// One segment holds 160 septets alone, 153 when the message is split (the rest is the
/// concatenation header); UCS-2 holds 70 units alone, 67 split.
const GSM_SINGLE: usize = 160;
const GSM_SPLIT: usize = 153;
const UCS2_SINGLE: usize = 70;
const UCS2_SPLIT: usize = 67;

/// The GSM 03.38 basic alphabet (one septet each; ESC is not a character of its own).
const GSM_BASIC: &str = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?\
¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";
/// The extension table: ESC and the character, two septets each.
const GSM_EXTENSION: &str = "\u{0c}^{}\\[~]|€";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Encoding {
    #[serde(rename = "GSM-7")]
    Gsm7,
    #[serde(rename = "UCS-2")]
    Ucs2,
}

/// The measure of one text, as a template version records it per locale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SmsCost {
    pub encoding: Encoding,
    /// GSM-7 septets, or UTF-16 code units for UCS-2.
    pub characters: usize,
    pub segments: usize,
}

/// The encoding, size and segment count of `text`.
pub fn measure(text: &str) -> SmsCost {
    let gsm = text
        .chars()
        .try_fold(0usize, |total, c| Some(total + gsm_septets(c)?));
    let (encoding, width, single, split): (_, fn(char) -> usize, _, _) = match gsm {
        Some(_) => (
            Encoding::Gsm7,
            |c| gsm_septets(c).unwrap_or(2),
            GSM_SINGLE,
            GSM_SPLIT,
        ),
        None => (Encoding::Ucs2, char::len_utf16, UCS2_SINGLE, UCS2_SPLIT),
    };
    let characters = text.chars().map(width).sum();
    let segments = if characters <= single {
        1
    } else {
        // A segment never splits a character: an escape and the character it extends,
        // or the two halves of a surrogate pair, move to the next segment together.
        let (mut segments, mut used) = (1, 0);
        for units in text.chars().map(width) {
            if used + units > split {
                segments += 1;
                used = 0;
            }
            used += units;
        }
        segments
    };
    SmsCost {
        encoding,
        characters,
        segments,
    }
}

/// The septets `c` takes in GSM-7, if it is in the alphabet.
fn gsm_septets(c: char) -> Option<usize> {
    if GSM_BASIC.contains(c) {
        Some(1)
    } else if GSM_EXTENSION.contains(c) {
        Some(2)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments(text: &str) -> (Encoding, usize, usize) {
        let cost = measure(text);
        (cost.encoding, cost.characters, cost.segments)
    }

    #[test]
    fn gsm_7_splits_at_160_then_every_153() {
        for (length, expected) in [(1, 1), (160, 1), (161, 2), (306, 2), (307, 3), (459, 3)] {
            assert_eq!(
                segments(&"a".repeat(length)),
                (Encoding::Gsm7, length, expected),
                "{length} characters"
            );
        }
    }

    #[test]
    fn extension_characters_count_twice() {
        assert_eq!(segments("€"), (Encoding::Gsm7, 2, 1));
        assert_eq!(segments("{x}"), (Encoding::Gsm7, 5, 1));
        // 159 plain characters and one euro sign: 161 septets, two segments.
        assert_eq!(
            segments(&format!("{}€", "a".repeat(159))),
            (Encoding::Gsm7, 161, 2)
        );
    }

    #[test]
    fn a_segment_boundary_never_splits_a_character() {
        // 306 septets fit two split segments, but the euro sign's escape would end the
        // first and its character begin the second: it moves whole, and so needs a third.
        let euro = format!("{}€{}", "a".repeat(152), "a".repeat(152));
        assert_eq!(segments(&euro), (Encoding::Gsm7, 306, 3));
        let euro = format!("{}€{}", "a".repeat(151), "a".repeat(152));
        assert_eq!(segments(&euro), (Encoding::Gsm7, 305, 2), "it fits whole");
        // 134 units fit two split segments, but not with a surrogate pair on the boundary.
        let emoji = format!("{}🙂{}", "ж".repeat(66), "ж".repeat(66));
        assert_eq!(segments(&emoji), (Encoding::Ucs2, 134, 3));
    }

    #[test]
    fn one_character_outside_gsm_7_forces_ucs_2() {
        assert_eq!(
            segments("ça va"),
            (Encoding::Ucs2, 5, 1),
            "ç is not GSM-7 but Ç is"
        );
        assert_eq!(segments("Ça va"), (Encoding::Gsm7, 5, 1));
        // An emoji is two UTF-16 units.
        assert_eq!(
            segments(&format!("{}🙂", "a".repeat(68))),
            (Encoding::Ucs2, 70, 1)
        );
        assert_eq!(
            segments(&format!("{}🙂", "a".repeat(69))),
            (Encoding::Ucs2, 71, 2)
        );
        assert_eq!(segments(&"ж".repeat(70)), (Encoding::Ucs2, 70, 1));
        assert_eq!(segments(&"ж".repeat(71)), (Encoding::Ucs2, 71, 2));
        assert_eq!(segments(&"ж".repeat(134)), (Encoding::Ucs2, 134, 2));
        assert_eq!(segments(&"ж".repeat(135)), (Encoding::Ucs2, 135, 3));
    }
}
