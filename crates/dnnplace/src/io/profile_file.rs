//! Device profile files: a TOML profile ([`DeviceProfile::from_toml`], format in
//! [`crate::model::profiles`]) read from disk within [`TEXT_LIMIT_BYTES`].

use super::input_file::{read_input_text, TEXT_LIMIT_BYTES};
use crate::model::profiles::{DeviceProfile, ProfileError};

impl DeviceProfile {
    /// Reads a TOML profile file; errors name the file.
    pub fn read(path: &std::path::Path) -> Result<Self, ProfileError> {
        let err = |message: String| ProfileError::File {
            path: path.display().to_string(),
            message,
        };
        let text = read_input_text(path, TEXT_LIMIT_BYTES).map_err(err)?;
        Self::from_toml(&text).map_err(err)
    }
}
