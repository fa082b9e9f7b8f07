#!/usr/bin/env python3
"""run_clm.py's data path, for comparing zero's blocks with Hugging Face's.

Loads FILE with `datasets` as run_clm does ("text" builder with keep_linebreaks=True, or "json" for
.jsonl), splits train[:P%] / train[P%:], tokenizes each example as run_clm's tokenize_function
does, `tokenizer(examples["text"])` (add_special_tokens=True: a Llama tokenizer's bos on every
text, nothing for GPT-2's), with transformers' fast tokenizer over TOKENIZER_DIR/tokenizer.json, and
applies run_clm's group_texts with map(batched=True) (1000 examples per batch). Writes
"validation N", N lines of ids, "train M", M lines of ids to OUT. Exit 3 when datasets or
transformers is not importable (pip only).
Usage: run_clm_blocks_reference.py FILE TOKENIZER_DIR PERCENT BLOCK_SIZE OUT
"""
import os
import sys
from itertools import chain


def main():
    path, tokenizer_dir, percent, block_size, out = sys.argv[1:6]
    percent, block_size = int(percent), int(block_size)
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        from datasets import disable_progress_bars, load_dataset
        from transformers import PreTrainedTokenizerFast
        from transformers.utils import logging as transformers_logging
    except ImportError as error:
        print(f"reference unavailable: {error}", file=sys.stderr)
        return 3
    disable_progress_bars()
    builder = "json" if path.endswith((".jsonl", ".json")) else "text"
    options = {"keep_linebreaks": True} if builder == "text" else {}
    files = {"train": path}
    # datasets refuses an empty slice: percent 0 is no validation split (as --streaming has none).
    validation = (load_dataset(builder, data_files=files, split=f"train[:{percent}%]", **options)
                  if percent > 0 else None)
    train = load_dataset(builder, data_files=files, split=f"train[{percent}%:]", **options)
    transformers_logging.set_verbosity_error()  # run_clm silences the long-input warning too
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=os.path.join(tokenizer_dir, "tokenizer.json"))

    def tokenize(examples):  # run_clm.py's tokenize_function
        return {"input_ids": tokenizer(examples["text"])["input_ids"]}

    def group_texts(examples):  # run_clm.py's, verbatim in substance
        concatenated = {k: list(chain(*examples[k])) for k in examples.keys()}
        total_length = len(concatenated[list(examples.keys())[0]])
        total_length = (total_length // block_size) * block_size
        return {k: [t[i:i + block_size] for i in range(0, total_length, block_size)]
                for k, t in concatenated.items()}

    with open(out, "w") as f:
        for name, dataset in (("validation", validation), ("train", train)):
            if dataset is None:
                f.write(f"{name} 0\n")
                continue
            dataset = dataset.map(tokenize, batched=True, remove_columns=dataset.column_names)
            dataset = dataset.map(group_texts, batched=True)
            f.write(f"{name} {len(dataset)}\n")
            for block in dataset["input_ids"]:
                f.write(" ".join(map(str, block)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
