"""The tiny Llama-family configurations the golden tests build with transformers (one place for
model_family_reference.py and llama_family_reference.py): grouped-query attention, llama3 rope
scaling, untied and tied heads, Llama's attention and MLP biases, a head_dim that is not
hidden_size / heads, Mistral's window, Qwen2's q/k/v biases. Each value is (config class name,
keyword arguments)."""

LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 64}

CASES = {
    "llama_gqa_llama3_untied": ("LlamaConfig", dict(
        vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=128,
        rope_theta=500000.0, rope_scaling=LLAMA3_SCALING, tie_word_embeddings=False)),
    "llama_biases_head_dim_tied": ("LlamaConfig", dict(
        vocab_size=300, hidden_size=64, intermediate_size=80, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=4, head_dim=32, attention_bias=True,
        mlp_bias=True, max_position_embeddings=64, tie_word_embeddings=True)),
    "mistral_window": ("MistralConfig", dict(
        vocab_size=260, hidden_size=48, intermediate_size=112, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, sliding_window=64,
        max_position_embeddings=256, tie_word_embeddings=False)),
    "qwen2_tied": ("Qwen2Config", dict(
        vocab_size=320, hidden_size=56, intermediate_size=72, num_hidden_layers=2,
        num_attention_heads=7, num_key_value_heads=1, max_position_embeddings=128,
        tie_word_embeddings=True)),
    "qwen2_untied": ("Qwen2Config", dict(
        vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        tie_word_embeddings=False)),
}


def build_config(transformers, name):
    class_name, arguments = CASES[name]
    return getattr(transformers, class_name)(**arguments)
