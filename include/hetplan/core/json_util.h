// Helpers to read JSON documents with errors that name the field path ("stages[2].devices").
// They throw InputError; public parse functions wrap them with capture_errors(file, ...).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace hetplan {

using Json = nlohmann::json;

// path + "." + key (or just key when path is empty); path + "[i]" for arrays.
std::string field_path(std::string_view path, std::string_view key);
std::string index_path(std::string_view path, std::size_t i);

const Json& json_require(const Json& obj, std::string_view key, std::string_view path);
double json_number(const Json& obj, std::string_view key, std::string_view path);
double json_number_or(const Json& obj, std::string_view key, std::string_view path, double dflt);
long long json_int(const Json& obj, std::string_view key, std::string_view path);
long long json_int_or(const Json& obj, std::string_view key, std::string_view path, long long dflt);
std::string json_string(const Json& obj, std::string_view key, std::string_view path);
std::string json_string_or(const Json& obj, std::string_view key, std::string_view path,
                           std::string_view dflt);
bool json_bool_or(const Json& obj, std::string_view key, std::string_view path, bool dflt);

// Parses JSON text as Json::parse does, but refuses a key given twice in one object (Json::parse
// keeps the last silently): throws InputError("<path of the key>", "duplicate key ..."), and
// nesting past 64 levels. Syntax errors throw Json::parse_error. Linear in the text's length.
Json parse_json_unique_keys(std::string_view text);

// Throws InputError("<path>.<key>", "unknown field (did you mean '...'?); expected one of ...")
// for the first key of object obj that is not among `keys`.
void json_refuse_unknown_keys(const Json& obj, std::string_view path,
                              const std::vector<std::string>& keys);

// Checks `version` equals expected, naming the path on mismatch.
void json_require_version(const Json& doc, int expected, std::string_view path);

// Reads a whole file of at most 256 MiB; throws InputError("<file>: cannot read ...") when it
// cannot, or when the file is larger.
std::string read_text_file(const std::string& file);
// Writes atomically (temporary file then rename), so a failure never leaves a half-written file.
// Throws InputError naming the file when it cannot.
void write_text_file_atomic(const std::string& file, std::string_view text);

}  // namespace hetplan
