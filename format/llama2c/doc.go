// Package llama2c reads the checkpoint and tokenizer files of Andrej
// Karpathy's llama2.c (run.c) and converts them to the Hugging Face Llama
// layout used by the rlvr engine.
//
// # Checkpoints
//
// A llama2.c checkpoint (the "legacy" export, version 0) is a little-endian
// file holding a 28-byte header of seven int32 values
//
//	dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
//
// followed by float32 tensors in this order: token_embedding_table (V,D),
// rms_att_weight (L,D), wq (L,H*hd,D), wk (L,KV*hd,D), wv (L,KV*hd,D),
// wo (L,D,H*hd), rms_ffn_weight (L,D), w1 (L,F,D), w2 (L,D,F), w3 (L,F,D),
// rms_final_weight (D), two unused RoPE tables of seq_len*hd/2 values each
// (freq_cis_real and freq_cis_imag, skipped), and, only when vocab_size is
// negative, an unshared classifier wcls (V,D). A positive vocab_size means
// the classifier is tied to the token embedding.
//
// [ReadCheckpoint] and [Parse] return the tensors under their Hugging Face
// Llama names (see [Checkpoint]). The query and key projections are
// reordered with [PermuteForRotateHalf] so that an engine using Hugging
// Face's rotate-half rotary embedding reproduces run.c, which rotates
// interleaved pairs.
//
// The model hyperparameters that are not stored in the file are those of
// run.c: rotary base [RopeTheta] (10000) and RMSNorm epsilon [RMSNormEps]
// (1e-5). The matching Hugging Face config.json fields are hidden_size=Dim,
// intermediate_size=Hidden, num_hidden_layers=Layers,
// num_attention_heads=Heads, num_key_value_heads=KVHeads,
// vocab_size=Vocab, max_position_embeddings=SeqLen, rope_theta=10000,
// rms_norm_eps=1e-5, hidden_act="silu" and
// tie_word_embeddings=SharedClassifier.
//
// # Tokenizers
//
// [ReadTokenizer] loads a llama2.c tokenizer file (as written by
// tokenizer.py) and [Tokenizer.Encode] and [Tokenizer.Decode] reproduce
// run.c's encode and decode functions, including their departures from
// SentencePiece (no whitespace normalisation, a greedy highest-score merge
// loop).
package llama2c
