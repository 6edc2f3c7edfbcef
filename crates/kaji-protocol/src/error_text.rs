//! An error as one line of text for a person: the error, then each cause
//! that adds something. Pure text; it never looks at what kind of error it
//! is given.

/// `error` and its sources, joined with `: `; a cause whose text is
/// already in the line (libraries often repeat their source) is left out.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn causes_are_joined_and_repeats_left_out() {
        let inner = Layer("connection refused", None);
        let middle = Layer("connect error: connection refused", Some(Box::new(inner)));
        let outer = Layer("error sending request", Some(Box::new(middle)));
        assert_eq!(
            error_chain(&outer),
            "error sending request: connect error: connection refused"
        );
    }
}
