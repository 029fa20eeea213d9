/* generation_config.json: the sampling defaults and stop tokens a model
 * folder ships. A file that parses holds ids and values in their ranges. */
#include "fuzz_util.h"

#include "orin/error.h"
#include "orin/generation_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    orin_generation_config g;
    if (orin_generation_config_parse((const char *)data, size, "generation_config.json", &g) != 0) {
        fuzz_check_error(orin_error());
        return 0;
    }
    FUZZ_ASSERT(g.present, "present");
    FUZZ_ASSERT(g.do_sample >= -1 && g.do_sample <= 1, "do_sample %d", g.do_sample);
    FUZZ_ASSERT(g.n_eos >= 0 && g.n_eos <= ORIN_GEN_MAX_EOS, "n_eos %d", g.n_eos);
    for (int i = 0; i < g.n_eos; i++)
        FUZZ_ASSERT(g.eos_token_ids[i] >= 0, "eos id %d", g.eos_token_ids[i]);
    FUZZ_ASSERT(g.top_k >= -1, "top_k %d", g.top_k);
    return 0;
}
