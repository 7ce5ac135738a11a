// kvforge tokenize — token ids of stdin's bytes (nothing stripped).
#include <cstdio>
#include <string>

#include "commands.h"
#include "flags.h"
#include "model_file.h"
#include "tokenizer/tokenizer.h"

namespace kvforge::cli {

int TokenizeMain(const Args& args) {
  std::string model;
  bool no_special = false, json = false;
  FlagParser p(
      "tokenize",
      "Reads all of stdin as bytes and prints its token ids (one line, space-separated).\n"
      "By default BOS/EOS are added as the vocabulary asks and special-token text is parsed.");
  p.AddString("model", &model, "GGUF model or vocab-only GGUF path (default: the embedded model)");
  p.AddBool("no-special", &no_special, "add no BOS/EOS and treat special-token text as plain text");
  p.AddBool("json", &json, "print a JSON array");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  auto file = OpenModelFile(model);
  if (!file.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", file.error().message().c_str());
    return 1;
  }
  auto tok = tokenizer::Tokenizer::FromGguf(**file);
  if (!tok.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", tok.error().message().c_str());
    return 1;
  }
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), stdin)) > 0) text.append(buf, n);
  const auto ids = (*tok)->Encode(text, !no_special, !no_special);
  std::string out = json ? "[" : "";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += json ? "," : " ";
    out += std::to_string(ids[i]);
  }
  out += json ? "]\n" : "\n";
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace kvforge::cli
