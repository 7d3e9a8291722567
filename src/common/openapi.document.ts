import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, type OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { API_KEY_SECURITY } from './api-route.decorator';
import { SHARED_SCHEMAS } from './openapi.schemas';

/**
 * The OpenAPI document of the app's routes (each described by its @ApiRoute), with the API key
 * scheme and the shared schemas that DTOs reference by name.
 */
export function createOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Data copilot')
    .setDescription(
      'Metadata-defined objects, records, and LLM agents over them. Every /api route needs an API key as a ' +
        'Bearer token; /health and these docs do not. Every error answers with `{ error, code, details? }`.',
    )
    .setVersion('1')
    // Relative: the server the document was fetched from.
    .addServer('/')
    .addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'API key',
        description: 'An API key (POST /api/v1/api-keys, or ADMIN_API_KEY) sent as `Authorization: Bearer <key>`',
      },
      API_KEY_SECURITY,
    )
    .build();
  // As package.json: no license is granted.
  config.info.license = { name: 'UNLICENSED' };
  const document = SwaggerModule.createDocument(app, config);
  document.components = { ...document.components, schemas: { ...document.components?.schemas, ...SHARED_SCHEMAS } };
  return document;
}
