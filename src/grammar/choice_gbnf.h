// grammar/choice_gbnf.h — a list of strings to GBNF: exactly one of them (vLLM's guided_choice).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::grammar {

// Errors: an empty list, more than `max_choices` (naming max_choices), invalid UTF-8.
Result<std::string> ChoiceToGbnf(const std::vector<std::string>& choices,
                                 int32_t max_choices = 1024);

}  // namespace kvforge::grammar
