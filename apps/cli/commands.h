// commands.h — the `kvforge` subcommands. Each takes the arguments after its name and returns the
// process exit code (0 ok, 1 runtime failure, 2 usage error).
#pragma once

#include <string>
#include <vector>

namespace kvforge::cli {

using Args = std::vector<std::string>;

int RunMain(const Args& args);           // cmd_run.cc
int TokenizeMain(const Args& args);      // cmd_tokenize.cc
int InfoMain(const Args& args);          // cmd_info.cc
int MakeModelMain(const Args& args);     // cmd_make_model.cc
int QuantizeMain(const Args& args);      // quantize_cmd.cc
int EvalMain(const Args& args);          // cmd_eval.cc
int EvalKvMain(const Args& args);        // cmd_eval_kv.cc (eval kv)
int EvalPasskeyMain(const Args& args);   // cmd_eval_passkey.cc (eval passkey)
int EvalStreamMain(const Args& args);    // cmd_eval_stream.cc (eval stream)
int BenchMain(const Args& args);         // cmd_bench.cc
int CalcMain(const Args& args);          // cmd_calc.cc
int ChatTemplateMain(const Args& args);  // cmd_chat_template.cc
int ServeMain(const Args& args);         // cmd_serve.cc (server module)
int BenchServeMain(const Args& args);    // cmd_bench_serve.cc (server module)
int RouteMain(const Args& args);         // cmd_route.cc (router module)

}  // namespace kvforge::cli
