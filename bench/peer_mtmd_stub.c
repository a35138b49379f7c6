/* A stand-in for libmtmd.so.0, the multimodal library that the llama-server
 * in ../shared/peers links against but that the peer build does not ship
 * (`llama-server --version` exits 127 without it). bench/serve_bench.py
 * compiles it into a temporary directory and puts that on LD_LIBRARY_PATH
 * for llama-server only, so the peer runs text-only; it is never part of
 * ork. Every entry point a multimodal request would reach aborts with a
 * message, so a measurement can never run through a stub silently; the two
 * that llama-server calls on every start (its log hook and the media
 * marker string) do what a text-only server needs. */
#include <stdio.h>
#include <stdlib.h>

static void refuse(const char* name) {
  fprintf(stderr, "libmtmd stand-in (bench/peer_mtmd_stub.c): %s called; multimodal input is not available\n", name);
  abort();
}

#define REFUSE(name) \
  void name(void) { refuse(#name); }

REFUSE(mtmd_bitmap_free)
REFUSE(mtmd_bitmap_get_data)
REFUSE(mtmd_bitmap_get_n_bytes)
REFUSE(mtmd_bitmap_set_id)
REFUSE(mtmd_context_params_default)
REFUSE(mtmd_free)
REFUSE(mtmd_helper_bitmap_init_from_buf)
REFUSE(mtmd_helper_eval_chunk_single)
REFUSE(mtmd_init_from_file)
REFUSE(mtmd_input_chunk_copy)
REFUSE(mtmd_input_chunk_free)
REFUSE(mtmd_input_chunk_get_id)
REFUSE(mtmd_input_chunk_get_n_pos)
REFUSE(mtmd_input_chunk_get_n_tokens)
REFUSE(mtmd_input_chunk_get_tokens_text)
REFUSE(mtmd_input_chunk_get_type)
REFUSE(mtmd_input_chunks_free)
REFUSE(mtmd_input_chunks_get)
REFUSE(mtmd_input_chunks_init)
REFUSE(mtmd_input_chunks_size)
REFUSE(mtmd_support_audio)
REFUSE(mtmd_support_vision)
REFUSE(mtmd_tokenize)

const char* mtmd_default_marker(void) { return "<__media__>"; }

void mtmd_helper_log_set(void* callback, void* user_data) {
  (void)callback;
  (void)user_data;
}
