//! serde's messages in user words: the Rust types they name (`expected f64`, `expected
//! struct PoolConfig`, `invalid type: map`) become what a user writes (a number, an object).

/// `message` (serde's) with Rust type names replaced by user words: `invalid type: string
/// "x", expected f64` becomes `invalid type: the string "x", expected a number`.
pub fn user_words(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("expected ") {
        let (before, after) = rest.split_at(at + "expected ".len());
        out.push_str(before);
        let (replacement, used) = expected_words(after);
        out.push_str(replacement);
        rest = &after[used..];
    }
    out.push_str(rest);
    unexpected_words(&out)
}

/// What `text` (the words after "expected ") names, and how many bytes of it that was.
fn expected_words(text: &str) -> (&'static str, usize) {
    let word_end = |from: usize| {
        text[from..]
            .find(|c: char| !c.is_alphanumeric() && c != '_')
            .map_or(text.len(), |e| from + e)
    };
    // `struct Name`, `enum Name`, `tuple struct Name`: the name is a Rust type's.
    for (prefix, words) in [
        ("struct variant ", "an object"),
        ("tuple struct ", "a list"),
        ("struct ", "an object"),
        ("enum ", "one of its values"),
    ] {
        if let Some(name) = text.strip_prefix(prefix)
            && name.starts_with(|c: char| c.is_ascii_uppercase())
        {
            return (words, word_end(prefix.len()));
        }
    }
    let first = &text[..word_end(0)];
    let words = match first {
        "f32" | "f64" => "a number",
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number (0 or more)",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number",
        "bool" => "true or false",
        "char" => "a single character",
        "unit" => "nothing (null)",
        _ => {
            for (phrase, words) in [
                ("a borrowed string", "a string"),
                ("a sequence", "a list"),
                ("a map", "an object"),
                ("a boolean", "true or false"),
            ] {
                if text.starts_with(phrase) {
                    return (words, phrase.len());
                }
            }
            return ("", 0);
        }
    };
    (words, first.len())
}

/// serde's names of what it found (`invalid type: map, ...`) in user words.
fn unexpected_words(message: &str) -> String {
    const FOUND: [(&str, &str); 7] = [
        ("invalid type: map,", "invalid type: an object,"),
        ("invalid type: sequence,", "invalid type: a list,"),
        ("invalid type: unit value,", "invalid type: null,"),
        ("invalid type: floating point ", "invalid type: the number "),
        ("invalid type: integer ", "invalid type: the whole number "),
        ("invalid type: string ", "invalid type: the string "),
        ("invalid type: boolean ", "invalid type: "),
    ];
    let mut out = message.to_string();
    for (from, to) in FOUND {
        out = out.replace(from, to);
    }
    out = out
        .replace("invalid value: integer ", "invalid value: ")
        .replace("invalid value: floating point ", "invalid value: ");
    out
}

#[cfg(test)]
mod tests {
    use super::user_words;

    #[test]
    fn rust_type_names_become_user_words() {
        let cases = [
            (
                "invalid type: string \"abc\", expected f64",
                "invalid type: the string \"abc\", expected a number",
            ),
            (
                "invalid value: integer `-1`, expected u32",
                "invalid value: `-1`, expected a whole number (0 or more)",
            ),
            (
                "invalid type: floating point `1.5`, expected u64",
                "invalid type: the number `1.5`, expected a whole number (0 or more)",
            ),
            (
                "invalid type: sequence, expected struct PoolConfig",
                "invalid type: a list, expected an object",
            ),
            (
                "invalid type: map, expected a sequence",
                "invalid type: an object, expected a list",
            ),
            (
                "invalid type: integer `3`, expected a boolean",
                "invalid type: the whole number `3`, expected true or false",
            ),
            (
                "invalid type: boolean `true`, expected enum SchedulingMode",
                "invalid type: `true`, expected one of its values",
            ),
            (
                "invalid type: integer `1`, expected a borrowed string",
                "invalid type: the whole number `1`, expected a string",
            ),
            // Words serde already says in user words stay.
            (
                "unknown variant `fofo`, expected `fifo` or `fair_share`",
                "unknown variant `fofo`, expected `fifo` or `fair_share`",
            ),
            ("missing field `name`", "missing field `name`"),
        ];
        for (input, expected) in cases {
            assert_eq!(user_words(input), expected, "{input}");
        }
    }
}
