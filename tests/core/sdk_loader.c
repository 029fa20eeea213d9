/* Loads the plugin named by argv[1] (the one sdk_test.sh built out of tree
 * against the installed SDK) and checks what it registered. */
#include "test_util.h"
#include "orin/plugin.h"
#include "orin/ops.h"
#include "orin/error.h"

#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
        return 2;
    }
    orin_plugin_set *set = orin_plugin_set_create();
    orin_registry *reg = orin_registry_create();

    CHECK(orin_plugin_load(set, reg, argv[1]) == 0, "%s", orin_error());
    CHECK(orin_plugin_set_count(set) == 1 &&
          strcmp(orin_plugin_set_at(set, 0)->name, "sdk_example") == 0);
    const orin_op_impl *impl =
        orin_registry_find(reg, ORIN_OP_ADD, "sdk", ORIN_DEVICE_CPU, ORIN_F32);
    CHECK(impl && impl->run(NULL, NULL) == 0, "the plugin's op is registered");
    CHECK(orin_registry_count(reg) == 1);
    CHECK(strcmp(orin_registry_owner(reg, 0), "sdk_example") == 0);

    orin_registry_destroy(reg);
    orin_plugin_set_destroy(set);
    return test_finish();
}
