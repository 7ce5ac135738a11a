#include "chat_prompt.h"

#include "base/strings.h"
#include "chat/chat_template.h"
#include "chat/json.h"

namespace kvforge::cli {

Result<std::string> RenderChatPrompt(const std::string& template_source, const std::string& system,
                                     const std::string& user, const std::string& bos,
                                     const std::string& eos) {
  KVF_ASSIGN_OR_RETURN(chat::ChatTemplate tmpl,
                       chat::ChatTemplate::Parse(
                           template_source.empty() ? chat::kDefaultChatTemplate : template_source));
  std::string json = "[";
  if (!system.empty()) json += "{\"role\":\"system\",\"content\":" + base::JsonQuote(system) + "},";
  json += "{\"role\":\"user\",\"content\":" + base::JsonQuote(user) + "}]";
  chat::ChatInputs in;
  KVF_ASSIGN_OR_RETURN(in.messages, chat::ParseJson(json));
  in.bos_token = bos;
  in.eos_token = eos;
  in.add_generation_prompt = true;
  return tmpl.Render(in);
}

}  // namespace kvforge::cli
