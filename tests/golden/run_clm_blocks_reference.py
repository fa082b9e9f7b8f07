import sys, os
os.environ["HF_DATASETS_OFFLINE"]="1"
from datasets import load_dataset
from tokenizers import Tokenizer
from itertools import chain
path, tokdir, p, block_size, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ext = "text" if not path.endswith(".jsonl") else "json"
kw = {"keep_linebreaks": True} if ext == "text" else {}
val = load_dataset(ext, data_files={"train": path}, split=f"train[:{p}%]", **kw)
train = load_dataset(ext, data_files={"train": path}, split=f"train[{p}%:]", **kw)
tok = Tokenizer.from_file(os.path.join(tokdir, "tokenizer.json"))
def tokenize(ex):
    return {"input_ids": [e.ids for e in tok.encode_batch(ex["text"], add_special_tokens=False)]}
def group_texts(examples):
    concatenated = {k: list(chain(*examples[k])) for k in examples.keys()}
    total_length = len(concatenated[list(examples.keys())[0]])
    total_length = (total_length // block_size) * block_size
    return {k: [t[i : i + block_size] for i in range(0, total_length, block_size)] for k, t in concatenated.items()}
with open(out, "w") as f:
    for name, ds in (("validation", val), ("train", train)):
        ds = ds.map(tokenize, batched=True, remove_columns=ds.column_names)
        ds = ds.map(group_texts, batched=True)
        f.write(f"{name} {len(ds)}\n")
        for b in ds["input_ids"]:
            f.write(" ".join(map(str, b)) + "\n")
print("done", len(val), len(train))
