// chat_prompt.h — renders a conversation with a model's chat template for `kvforge run --chat`.
#pragma once

#include <string>

#include "kvforge/status.h"

namespace kvforge::cli {

// Renders [system?, user] with `template_source` (empty: chat::kDefaultChatTemplate), adding the
// generation prompt. bos/eos are the vocabulary's token texts.
Result<std::string> RenderChatPrompt(const std::string& template_source, const std::string& system,
                                     const std::string& user, const std::string& bos,
                                     const std::string& eos);

}  // namespace kvforge::cli
