/* The API docs page: Swagger UI on the portal's own schema. validatorUrl null: the schema is never
   sent to swagger.io's validator (nothing leaves the portal). */
(function () {
  "use strict";
  var url = JSON.parse(document.getElementById("api-schema-url").textContent);
  window.ui = SwaggerUIBundle({
    url: url,
    dom_id: "#swagger-ui",
    validatorUrl: null,
    deepLinking: false,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    persistAuthorization: false
  });
})();
