//! WAV files: writing synthetic PCM clips and reading a clip's duration from its
//! header. The audio datasets make and read clips with it; the simulator reads the
//! uploaded clip's length the same way, so both sides agree on what was sent.
//!
//! vLLM's benchmark reads durations with `soundfile.info`, which knows many formats;
//! benchplan reads WAV (PCM or IEEE float, any channel count) and says so for others.

/// A clip's format and length, from its header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WavInfo {
    pub sample_rate: u32,
    pub channels: u16,
    pub bits_per_sample: u16,
    /// Bytes of sample data (the `data` chunk).
    pub data_bytes: u64,
}

impl WavInfo {
    /// Seconds of audio.
    pub fn duration(&self) -> f64 {
        let frame = u64::from(self.channels) * u64::from(self.bits_per_sample).div_ceil(8);
        if frame == 0 || self.sample_rate == 0 {
            return 0.0;
        }
        (self.data_bytes / frame) as f64 / f64::from(self.sample_rate)
    }
}

/// Reads the header of a RIFF/WAVE file: the `fmt ` chunk and the size of `data`.
pub fn info(bytes: &[u8]) -> Result<WavInfo, String> {
    if bytes.len() < 12 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err("not a WAV file (no RIFF/WAVE header); only WAV audio is read".into());
    }
    let mut at = 12;
    let mut fmt = None;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let size = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
        let body = at + 8;
        if id == b"fmt " {
            if size < 16 || body + 16 > bytes.len() {
                return Err("the WAV `fmt ` chunk is cut short".into());
            }
            let u16_at = |o: usize| u16::from_le_bytes([bytes[body + o], bytes[body + o + 1]]);
            let format = u16_at(0);
            // 1 = PCM, 3 = IEEE float, 0xFFFE = extensible (its sub-format says which).
            if !matches!(format, 1 | 3 | 0xFFFE) {
                return Err(format!(
                    "WAV format {format} is not PCM or float; re-encode the clip as PCM WAV"
                ));
            }
            fmt = Some((
                u32::from_le_bytes(bytes[body + 4..body + 8].try_into().expect("4 bytes")),
                u16_at(2),
                u16_at(14),
            ));
        } else if id == b"data" {
            let Some((sample_rate, channels, bits_per_sample)) = fmt else {
                return Err("the WAV `data` chunk comes before its `fmt ` chunk".into());
            };
            // A streamed WAV may say 0 or 0xFFFFFFFF here: the rest of the file is data.
            let available = (bytes.len() - body) as u64;
            let data_bytes = match size as u64 {
                0 | 0xFFFF_FFFF => available,
                n => n.min(available),
            };
            return Ok(WavInfo {
                sample_rate,
                channels,
                bits_per_sample,
                data_bytes,
            });
        }
        // Chunks are padded to an even size.
        at = body.saturating_add(size).saturating_add(size & 1);
    }
    Err("the WAV file has no `data` chunk".into())
}

/// A mono 16-bit PCM WAV of `duration` seconds at `sample_rate`: a quiet tone under
/// noise drawn from `noise` (deterministic for a seed), so clips differ as recordings do.
pub fn synthesize(duration: f64, sample_rate: u32, mut noise: impl FnMut() -> f64) -> Vec<u8> {
    let frames = (duration.max(0.0) * f64::from(sample_rate)).round() as u64;
    let data_bytes = frames * 2;
    let mut w = Vec::with_capacity(44 + data_bytes as usize);
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&((36 + data_bytes) as u32).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&sample_rate.to_le_bytes());
    w.extend_from_slice(&(sample_rate * 2).to_le_bytes()); // bytes a second
    w.extend_from_slice(&2u16.to_le_bytes()); // bytes a frame
    w.extend_from_slice(&16u16.to_le_bytes());
    w.extend_from_slice(b"data");
    w.extend_from_slice(&(data_bytes as u32).to_le_bytes());
    let pitch = 220.0 + 220.0 * noise();
    let step = std::f64::consts::TAU * pitch / f64::from(sample_rate);
    for i in 0..frames {
        let v = 0.2 * (step * i as f64).sin() + 0.05 * (noise() * 2.0 - 1.0);
        w.extend_from_slice(&((v * f64::from(i16::MAX)) as i16).to_le_bytes());
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synthesized_clip_reads_back_at_its_length() {
        let mut x = 0.0;
        let wav = synthesize(2.5, 16_000, || {
            x = (x + 0.37) % 1.0;
            x
        });
        assert_eq!(wav.len(), 44 + 2 * 40_000);
        let i = info(&wav).unwrap();
        assert_eq!(
            (i.sample_rate, i.channels, i.bits_per_sample),
            (16_000, 1, 16)
        );
        assert!((i.duration() - 2.5).abs() < 1e-12);
    }

    #[test]
    fn other_chunks_are_skipped_and_bad_files_are_named() {
        // A LIST chunk of odd size (padded) between fmt and data; stereo 24-bit at 8 kHz.
        let mut w = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
        w.extend_from_slice(&16u32.to_le_bytes());
        w.extend_from_slice(&1u16.to_le_bytes());
        w.extend_from_slice(&2u16.to_le_bytes());
        w.extend_from_slice(&8000u32.to_le_bytes());
        w.extend_from_slice(&48_000u32.to_le_bytes());
        w.extend_from_slice(&6u16.to_le_bytes());
        w.extend_from_slice(&24u16.to_le_bytes());
        w.extend_from_slice(b"LIST");
        w.extend_from_slice(&3u32.to_le_bytes());
        w.extend_from_slice(b"abc\0");
        w.extend_from_slice(b"data");
        w.extend_from_slice(&48_000u32.to_le_bytes());
        w.extend(std::iter::repeat_n(0u8, 48_000));
        assert!((info(&w).unwrap().duration() - 1.0).abs() < 1e-12);
        assert!(info(b"ID3\x03 an mp3").unwrap_err().contains("only WAV"));
        let mut float = w.clone();
        float[20] = 2; // ADPCM
        assert!(info(&float).unwrap_err().contains("not PCM"));
        assert!(info(&w[..40]).unwrap_err().contains("no `data`"));
    }
}
