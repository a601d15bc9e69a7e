// Parts shared by the language-model builders: the token embedding and the LM head with its loss.
#pragma once

#include <cstdint>
#include <string>

#include "graph_builder.h"

namespace hetplan::model::detail {

// Lookup in a [vocab x width] table, split along the vocabulary. Its backward pass needs only the
// token ids, so it keeps nothing.
int add_word_embedding(GraphBuilder& g, const std::string& name, std::int64_t seq,
                       std::int64_t vocab, std::int64_t width);

// Logits [seq x vocab] from `input` ([seq x width]) and the cross-entropy loss; returns the loss.
// A tied head reads the embedding table (tied_params) and owns only its bias, if any. The head
// keeps nothing: its input is kept by its producer (a norm or a projection); the loss keeps fp32
// logits.
int add_lm_head(GraphBuilder& g, const std::string& head_name, const std::string& loss_name,
                int input, std::int64_t seq, std::int64_t width, std::int64_t vocab, bool tied,
                bool bias);

}  // namespace hetplan::model::detail
