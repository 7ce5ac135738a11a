// filters_impl.h — internal: helpers shared by the filter implementations (filters.cc,
// filters_seq.cc) and the sequence filters' entry points for the registry in filters.cc.
// Invariants: every filter charges the render's step budget for the elements it touches and checks
// the size of what it builds (Interpreter::ChargeElements/ChargeString) before building it.
// Thread-safety: pure functions of their arguments and the render's Interpreter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/interpreter.h"
#include "chat/value.h"

namespace kvforge::chat::filters {

[[noreturn]] void FilterArgumentError(std::string message);
Value StrOf(const Value& v);
int64_t IntArg(const Value& v, const char* filter, const char* param);
Value GetPath(Interpreter& in, const Value& item, const Value& attribute);
Value IgnoreCase(const Value& v);
std::vector<Value> Items(Interpreter& in, const Value& v);
std::vector<Value> ItemsIfTruthy(Interpreter& in, const Value& v);
Value ListOf(Interpreter& in, std::vector<Value> items);
Value IteratorOf(Interpreter& in, std::vector<Value> items, const char* type = "generator");

// Sequence filters (filters_seq.cc).
Value FLength(Interpreter& in, const Value& v, CallArgs& args);
Value FList(Interpreter& in, const Value& v, CallArgs& args);
Value FFirst(Interpreter& in, const Value& v, CallArgs& args);
Value FLast(Interpreter& in, const Value& v, CallArgs& args);
Value FJoin(Interpreter& in, const Value& v, CallArgs& args);
Value FReverse(Interpreter& in, const Value& v, CallArgs& args);
Value FItems(Interpreter& in, const Value& v, CallArgs& args);
Value FDictsort(Interpreter& in, const Value& v, CallArgs& args);
Value FSort(Interpreter& in, const Value& v, CallArgs& args);
Value FUnique(Interpreter& in, const Value& v, CallArgs& args);
Value FMax(Interpreter& in, const Value& v, CallArgs& args);
Value FMin(Interpreter& in, const Value& v, CallArgs& args);
Value FSum(Interpreter& in, const Value& v, CallArgs& args);
Value FBatch(Interpreter& in, const Value& v, CallArgs& args);
Value FSlice(Interpreter& in, const Value& v, CallArgs& args);
Value FMap(Interpreter& in, const Value& v, CallArgs& args);
Value FSelect(Interpreter& in, const Value& v, CallArgs& args);
Value FReject(Interpreter& in, const Value& v, CallArgs& args);
Value FSelectAttr(Interpreter& in, const Value& v, CallArgs& args);
Value FRejectAttr(Interpreter& in, const Value& v, CallArgs& args);

}  // namespace kvforge::chat::filters
