//! The fair-share update.

use crate::model::{Tree, UpdateInput};
use crate::output::{ElementAttributes, PhaseClock, UpdateOutput};

/// Runs one fair-share update over `tree` (whose integral state it advances).
pub fn update(tree: &mut Tree, input: &UpdateInput, clock: &dyn PhaseClock) -> UpdateOutput {
    let _ = (input, clock);
    UpdateOutput {
        attributes: vec![ElementAttributes::default(); tree.len()],
        ..UpdateOutput::default()
    }
}
