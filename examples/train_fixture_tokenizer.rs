//! Makes the test fixture tokenizer: a small byte-level BPE trained on
//! tests/fixtures/corpus.txt (text written for this project), with `<s>` added at the
//! start of every encoding so tests exercise special-token accounting.
//! Run: `cargo run --example train_fixture_tokenizer` (rewrites tests/fixtures/tokenizer/tokenizer.json;
//! the tokenizer_config.json beside it, with a small chat template, is written by hand).

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, TokenizerBuilder};

fn main() -> tokenizers::Result<()> {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(1200)
        .min_frequency(1)
        .show_progress(false)
        .special_tokens(vec![
            AddedToken::from("<s>", true),
            AddedToken::from("</s>", true),
        ])
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut tokenizer = TokenizerBuilder::new()
        .with_model(BPE::default())
        .with_normalizer(None::<tokenizers::normalizers::NormalizerWrapper>)
        .with_pre_tokenizer(Some(ByteLevel::new(false, true, true)))
        .with_post_processor(Some(
            TemplateProcessing::builder()
                .try_single("<s> $A")
                .unwrap()
                .special_tokens(vec![("<s>", 0)])
                .build()
                .unwrap(),
        ))
        .with_decoder(Some(ByteLevelDecoder::default()))
        .build()?;
    tokenizer.train_from_files(
        &mut trainer,
        vec![format!("{root}/tests/fixtures/corpus.txt")],
    )?;
    let out = format!("{root}/tests/fixtures/tokenizer/tokenizer.json");
    tokenizer.save(&out, false)?;
    println!("wrote {out} (vocab {})", tokenizer.get_vocab_size(true));
    Ok(())
}
