/* orin.ini: inih's parser, our line reader and every key's validation.
 * Input: INI text. A file that loads must write back (orin_config_write) as
 * text that loads to the same configuration. */
#include "fuzz_util.h"

#include "orin/config.h"
#include "orin/error.h"

static orin_config cfg, again;
static char text[1 << 16], text2[1 << 16];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    orin_log_set_level(ORIN_LOG_ERROR);
    if (orin_config_load_string(&cfg, (const char *)data, size, "fuzz.ini", "/fuzz") != 0) {
        fuzz_check_error(orin_error());
        return 0;
    }
    /* The written form is the canonical one: it must read back unchanged. */
    int n = orin_config_write(&cfg, text, sizeof text);
    FUZZ_ASSERT(n >= 0, "write: %s", orin_error());
    FUZZ_ASSERT(orin_config_load_string(&again, text, strlen(text), "written.ini", "/fuzz") == 0,
                "written text does not load: %s\n%s", orin_error(), text);
    FUZZ_ASSERT(orin_config_write(&again, text2, sizeof text2) >= 0, "write again");
    FUZZ_ASSERT(strcmp(text, text2) == 0, "round trip changed the text:\n%s\n---\n%s", text, text2);
    return 0;
}
